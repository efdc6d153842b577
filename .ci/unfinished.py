"""Print, one per line, the node ids of the collected list (a file, the first argument, written by
``.ci/finished.py``) that no finished list (the other arguments) holds."""

import sys
from pathlib import Path

collected = [line for line in Path(sys.argv[1]).read_text().splitlines() if line]
finished = {line for path in sys.argv[2:] for line in Path(path).read_text().splitlines()}
sys.stdout.writelines(node + "\n" for node in collected if node not in finished)
