"""Revisions, oldest first by the date in their file name."""
