// A project's dispatch macro (as apex's type_shim.h writes it): one case per element type.
#define DISPATCH_FLOAT_AND_HALF(TYPE, LEVEL, NAME, ...) \
  switch (TYPE) {                                       \
    case 0: {                                           \
      using scalar_t_##LEVEL = float;                   \
      __VA_ARGS__;                                      \
      break;                                            \
    }                                                   \
    case 1: {                                           \
      using scalar_t_##LEVEL = at::Half;                \
      __VA_ARGS__;                                      \
      break;                                            \
    }                                                   \
  }
