"""Command-line interface (click; rich only for client output)."""
