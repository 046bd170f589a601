"""Verlet Sandbox from a checkout: `python main.py --help`. The CLI is sandbox/cli.py."""
from sandbox.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
