"""The simulation core: pure numpy (and the standard library), no drawing, no input.

A test walks the imports of this package and fails if pygame, pymunk or matplotlib
appear, so the lab, the benchmark and scripts can use it without a window.
"""
