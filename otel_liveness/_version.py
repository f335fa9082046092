"""The package's version: a leaf module, so that every layer (telemetry's instrumentation scope,
the command line) can name it without importing the package root."""

__version__ = "0.1.0"
