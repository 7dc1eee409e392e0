"""`python -m syndiffix_ops ...`: the `syndiffix-ops` command, for environments without the script on PATH."""

from syndiffix_ops.cli import main

main(prog_name="syndiffix-ops")
