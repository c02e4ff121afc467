import os
import sys

from .launch.warm import ENV, forward   # light: the server's heavy imports happen in the server

if os.environ.get(ENV) and len(sys.argv) > 1:   # a local run's warm-start server answers for this stage
    status = forward(os.environ[ENV], sys.argv[1:])
    if status is not None:
        sys.exit(status)

from .cli import main  # noqa: E402  (not imported by a stage the server runs)

sys.exit(main())
