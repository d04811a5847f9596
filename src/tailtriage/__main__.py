from tailtriage.cli import main

main()
