"""The tg-* command line tools."""
