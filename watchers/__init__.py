"""List+watch Kubernetes, normalize, correlate and publish to the bus."""
