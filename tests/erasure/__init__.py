"""The domain package: intake, clocks, the engine database, request ids, file modes."""
