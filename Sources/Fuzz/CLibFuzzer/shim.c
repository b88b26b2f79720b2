// Empty: the declarations are in include/CLibFuzzer.h.
