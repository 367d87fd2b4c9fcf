import sys

if sys.argv[1:2] == ["similarity"]:  # the TA's similarity check needs no torch: not grader.cli's imports (issue 41)
    from grader.report.similarity import command

    raise SystemExit(command(sys.argv[2:]))

from grader.cli import main

raise SystemExit(main())
