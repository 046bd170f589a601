"""The simulation core: pure numpy (and the standard library), no drawing, no input.

A test walks the imports of every file of this package (subpackages too) and fails if
pygame, pymunk, matplotlib or scipy appear, or if any of them imports another part of
``sandbox`` (levels, snapshots, files, the app): the lab, the benchmark and scripts can
use the core without a window, and everything else is built on it, never under it.
"""
