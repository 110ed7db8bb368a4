from clawstore.cli import main

main()
