import os
import sys

if os.environ.get("TOWERS_WARM") and len(sys.argv) > 1:   # a local run's warm-start server (towers.warm)
    from .warm import ENV, forward
    status = forward(os.environ[ENV], sys.argv[1:])
    if status is not None:
        sys.exit(status)

from .cli import main  # noqa: E402  (not imported by a stage the server runs)

sys.exit(main())
