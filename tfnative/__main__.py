from tfnative.cli import main

main()
