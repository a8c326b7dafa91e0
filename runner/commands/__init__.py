"""The commands of `gateway-sizer`, one module per job: `sweep` (sweep, calibrate, plan), `testbed` (testbed up
and down, restore), `report` (report, recommend, compare); `values` types their own flags. Each module's
`add_commands` adds its commands to the parser that `runner.cli` builds."""

__all__ = ["fetch", "report", "sweep", "testbed", "values"]
