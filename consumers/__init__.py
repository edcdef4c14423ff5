"""Durable JetStream consumers; each module owns one concern and exposes its router."""
