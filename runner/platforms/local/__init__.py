"""The embedded local platform: real processes on one Linux machine, limits by cgroups."""
