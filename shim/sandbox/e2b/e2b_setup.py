# codeshim: the working directory /mnt/data (an e2b cell run before the
# model's first code; e2b's own working directory is /home/user). Prints
# "fresh" when this interpreter never ran it (a new or restarted one),
# else "kept"; the mark is an attribute of sys, out of the code's globals.
import os as _cs_os, subprocess as _cs_sp, sys as _cs_sys
if not _cs_os.path.isdir('/mnt/data'):
    try:
        _cs_os.makedirs('/mnt/data')
    except OSError:
        _cs_sp.run(['sudo', '-n', 'install', '-d', '-o', str(_cs_os.getuid()), '-g',
                    str(_cs_os.getgid()), '/mnt/data'], capture_output=True)
_cs_os.chdir('/mnt/data')
print('kept' if getattr(_cs_sys, '_codeshim_up', 0) else 'fresh')
_cs_sys._codeshim_up = 1
del _cs_os, _cs_sp, _cs_sys
