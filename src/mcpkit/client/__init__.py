"""Client side: the low-level :class:`ClientSession` and the high-level :class:`Client`."""
