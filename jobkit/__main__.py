"""`python -m jobkit` runs the command-line interface."""

from jobkit.cli import main

if __name__ == "__main__":
    main()
