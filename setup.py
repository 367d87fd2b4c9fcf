"""Only one thing lives here, everything else is in pyproject.toml: the staff solutions (reference/*/solution_*)
stay out of every built distribution. setuptools puts every .py file of a package into the wheel and the sdist, and
pyproject's exclude-package-data covers data files only, so the module list is filtered here
(tests/test_install.py builds both and checks)."""

from setuptools import setup
from setuptools.command.build_py import build_py


class _BuildPy(build_py):
    def find_package_modules(self, package, package_dir):
        return [m for m in super().find_package_modules(package, package_dir) if not m[1].startswith("solution_")]


setup(cmdclass={"build_py": _BuildPy})
