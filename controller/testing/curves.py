"""A usage exporter whose series follow curves in time: a leak, a sawtooth, a page cache.

:class:`CurveExporter` is :class:`~controller.testing.prometheus.UsageExporter` with series set
as functions of the seconds since :meth:`CurveExporter.start`, evaluated at each scrape, so a
real Prometheus stores a working set that climbs, saws or levels off without the test feeding
it. :meth:`CurveExporter.page_cache` adds what cAdvisor reports beside the working set when a
pod reads files: ``container_memory_usage_bytes`` (working set plus the page cache) and
``container_memory_cache``, growing while the working set does not.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from controller.testing.prometheus import GpuSeries, UsageExporter

__all__ = ["Curve", "CurveExporter", "sawtooth"]

Curve = Callable[[float], float]
"""A value as a function of the seconds since the exporter started."""


def sawtooth(low: float, high: float, period_s: float) -> Curve:
    """A sawtooth: from ``low`` up to ``high`` over ``period_s``, freed back to ``low``, again."""
    return lambda t: low + (high - low) * ((t % period_s) / period_s)


class CurveExporter(UsageExporter):
    """``/metrics`` whose working sets, GPU utilizations and page caches follow :data:`Curve` s."""

    def __init__(self) -> None:
        super().__init__()
        self._started = time.monotonic()
        self._memory: dict[tuple[str, str], Curve] = {}
        self._util: dict[tuple[str, str, str], tuple[Curve, float]] = {}
        self._cache: dict[tuple[str, str], Curve] = {}

    def start(self) -> None:
        self._started = time.monotonic()
        super().start()

    def memory_curve(self, namespace: str, pod: str, working_set: Curve) -> None:
        """The pod's working set (bytes) follows ``working_set``."""
        self._memory[(namespace, pod)] = working_set

    def util_curve(
        self, namespace: str, pod: str, gpu: str, util: Curve, fb_used_mib: float = 40_000
    ) -> None:
        """One GPU of the pod has a utilization (%) following ``util``."""
        self._util[(namespace, pod, gpu)] = (util, fb_used_mib)

    def page_cache(self, namespace: str, pod: str, cache: Curve) -> None:
        """The pod's page cache (bytes) follows ``cache``: its usage grows, its working set not."""
        self._cache[(namespace, pod)] = cache

    def render(self) -> str:
        t = time.monotonic() - self._started
        for (namespace, pod), curve in self._memory.items():
            self.memory(namespace, pod, curve(t))
        for (namespace, pod, gpu), (util, fb_used_mib) in self._util.items():
            self.gpu(namespace, pod, gpu, GpuSeries(util=util(t), fb_used_mib=fb_used_mib))
        lines = [super().render()]
        for (namespace, pod), cache in self._cache.items():
            held = self._pods.get((namespace, pod))
            active = held.memory_bytes if held is not None and held.memory_bytes is not None else 0.0
            labels = f'namespace="{namespace}",pod="{pod}",container="main"'
            lines.append(f"container_memory_cache{{{labels}}} {cache(t)}\n")
            lines.append(f"container_memory_usage_bytes{{{labels}}} {active + cache(t)}\n")
        return "".join(lines)
