"""The embedded local platform: real processes on one Linux machine, limits by cgroups. The platform is
runner.platforms.local.platform (PLATFORMS imports it by name); the test bed, runner.platforms.local.testbed,
is also started by hand (`testbed up`) and by the local tests and benches."""

__all__ = ["platform", "testbed"]
