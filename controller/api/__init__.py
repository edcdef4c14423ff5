"""The small read API (FastAPI): history, runs, timelines, metrics and health."""
