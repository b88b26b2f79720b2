#ifndef C_LIB_FUZZER_H
#define C_LIB_FUZZER_H
#include <stddef.h>
#include <stdint.h>

// libFuzzer's driver (compiler-rt, linked by -sanitize=fuzzer). SwiftPM gives every executable its own
// entry point (`<module>_main`), so the fuzz targets start the driver themselves instead of using
// libFuzzer's `main`. Declared only: nothing calls it outside a -D FUZZING build.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*UserCb)(const uint8_t *Data, size_t Size));

#endif
