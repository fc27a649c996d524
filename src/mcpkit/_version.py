"""The package version, in a module of its own so that modules below ``mcpkit/__init__`` (which imports the client
and the server) can name it without an import circle."""

__version__ = "0.1.0"
