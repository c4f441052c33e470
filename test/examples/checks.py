"""What the example tests' scripts share: a check that prints ok/FAIL and
keeps the failures, and the closing line with the exit code."""


class Checks:
    def __init__(self, name):
        self.name = name
        self.failures = []

    def __call__(self, cond, what):
        print(("ok:   " if cond else "FAIL: ") + what)
        if not cond:
            self.failures.append(what)
        return cond

    def exit_code(self):
        print(f"{self.name}:", "ok" if not self.failures else f"{len(self.failures)} failures")
        return 1 if self.failures else 0
