"""The `meshcomm` command line: a registry of small subcommands."""
