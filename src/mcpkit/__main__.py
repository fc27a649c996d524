"""``python -m mcpkit ...``: the ``mcpkit`` command under this interpreter (handy in a venv that is not active)."""

from .cli import main

main()
