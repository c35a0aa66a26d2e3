"""Reproduction specs shipped with dpfair: one TOML per paper figure or table (``dpfair sweep NAME``)."""
