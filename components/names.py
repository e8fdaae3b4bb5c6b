"""Names and numbers the program uses in more than one place, defined once: Slurm's ports, and the objects one
component declares and another finds by name. Pure: it imports nothing of the program but its config."""

from __future__ import annotations

# Slurm's daemons (their upstream defaults, which every operator keeps), sshd and MariaDB.
SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
SLURMDBD_PORT = 6819
SLURMRESTD_PORT = 6820
SSHD_PORT = 22
MARIADB_PORT = 3306
