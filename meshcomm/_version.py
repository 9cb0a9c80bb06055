"""The package version, in one place below every layer."""

__version__ = "0.1.0"
