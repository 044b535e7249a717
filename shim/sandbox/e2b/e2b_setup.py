# codeshim: the working directory /mnt/data (an e2b cell run before the
# model's first code; e2b's own working directory is /home/user)
import os as _cs_os, subprocess as _cs_sp
if not _cs_os.path.isdir('/mnt/data'):
    try:
        _cs_os.makedirs('/mnt/data')
    except OSError:
        _cs_sp.run(['sudo', '-n', 'install', '-d', '-o', str(_cs_os.getuid()), '-g',
                    str(_cs_os.getgid()), '/mnt/data'], capture_output=True)
_cs_os.chdir('/mnt/data')
del _cs_os, _cs_sp
