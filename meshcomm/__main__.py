"""`python -m meshcomm ...` runs the `meshcomm` command line."""

from meshcomm.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
