"""Reaching other hosts: one primitive to run a command on a host (here or over ssh), the preflight probe, ports,
shipping files, elastic host discovery."""
