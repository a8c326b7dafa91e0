"""gateway-sizer: measure how many Envoy cores a Contour gateway needs.

The data flow is the layout: scenario -> plan -> sweep (interleaved rounds) -> visit (platform, driver, measure,
guards) -> assess (knee, curve) -> results -> figures -> report; docs/development.md maps every module.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
