"""Transformations of kiln's IR: graph passes, autodiff, lowering, schedules."""
