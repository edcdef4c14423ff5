"""Recorded job stories (JSON Lines watch streams), shipped as ``controller.testing.scenarios``."""
