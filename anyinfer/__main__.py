"""`python -m anyinfer` runs the command line."""

from anyinfer._cli import main

main()
