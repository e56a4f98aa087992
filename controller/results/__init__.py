"""Results: run directories (`rundir`), summary.json and its fidelity check (`summary`), a run's plots
(`plots`), and a sweep's tables and plots (`report`)."""
