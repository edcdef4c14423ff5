"""Rule thresholds live with the other settings in :mod:`controller.thresholds`; re-exported here."""

from controller.thresholds import RuleThresholds, ThresholdOverride

__all__ = ["RuleThresholds", "ThresholdOverride"]
