"""Rule thresholds live with the other settings in :mod:`controller.contract.thresholds`; re-exported here."""

from controller.contract.thresholds import RuleThresholds, ThresholdOverride

__all__ = ["RuleThresholds", "ThresholdOverride"]
