"""The build backend of picoll_torch: setuptools', with the installing interpreter's
site-packages on the path, so that setup.py imports the torch that is installed there (pip's build
isolation hides it otherwise)."""
import sys
import sysconfig

for _key in ("purelib", "platlib"):
    _path = sysconfig.get_paths()[_key]
    if _path not in sys.path:
        sys.path.append(_path)

from setuptools.build_meta import *  # noqa: F401,F403,E402  (the backend's hooks)
