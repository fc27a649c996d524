"""Server side: the low-level :class:`Server` and the high-level decorator API."""
