/*
 * fake_nvml.c: a TEST STAND-IN for NVIDIA's libnvidia-ml.so.1 (NVML), for the molecule
 * scenario `fleet` only. It is not NVIDIA code and drives no GPU: it answers a few NVML
 * queries from a text file, so that the fleet's GPU-less containers can show a GPU whose
 * NVML reports a fault (a remapped-row failure, uncorrected ECC errors, a recovery action,
 * a GPU that fell off the bus).
 *
 * The signatures, struct layouts (nvmlPciInfo_t, nvmlFieldValue_t with its nvmlValue_t
 * union) and constants follow NVIDIA's nvml.h (NVML API 13, as vendored in
 * github.com/NVIDIA/go-nvml gen/nvml/nvml.h); the few types used are declared below so
 * that no NVIDIA header is needed to build it.
 *
 * Built by `scripts/harness/fleet fake-nvml` (molecule/fleet/create.yml runs it) into
 * .cache/fleet/libnvidia-ml.so.1 with
 *     cc -shared -fPIC -O2 -Wall -Wextra -Werror -o libnvidia-ml.so.1 fake_nvml.c
 * and bind-mounted read-only into the GPU hosts at /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1,
 * where ctypes.CDLL("libnvidia-ml.so.1") finds it (molecule/fleet/molecule.yml).
 *
 * Configuration: /etc/gpufleet/fake-nvml.conf, read at nvmlInit_v2 (the environment variable
 * GPUFLEET_FAKE_NVML_CONF names another file, for trying the library outside the fleet).
 * No file: nvmlInit_v2 answers NVML_ERROR_DRIVER_NOT_LOADED, as on a machine without the
 * driver. `#` starts a comment; one GPU per line:
 *
 *     <bus id as sysfs names it, e.g. 0000:41:00.0> key=value ...
 *
 *     name                       the product name, underscores shown as spaces
 *                                (default NVIDIA_H100_80GB_HBM3)
 *     device                     0xNNNN, the PCI device id (default 0x2330, an H100 SXM):
 *                                nvmlDeviceGetPciInfo_v3's pciDeviceId is it << 16 | 0x10DE;
 *                                scripts/harness/fleet gpu-plant writes the same id into the
 *                                GPU's sysfs device file
 *     remap_failure              0/1   nvmlDeviceGetRemappedRows failureOccurred
 *     remap_pending              0/1   nvmlDeviceGetRemappedRows isPending
 *     remapped_correctable       N     nvmlDeviceGetRemappedRows corrRows
 *     remapped_uncorrectable     N     nvmlDeviceGetRemappedRows uncRows
 *     ecc_uncorrected_volatile   N     nvmlDeviceGetTotalEccErrors (uncorrected, volatile)
 *     ecc_uncorrected_aggregate  N     nvmlDeviceGetTotalEccErrors (uncorrected, aggregate)
 *     recovery_action            0-5   field NVML_FI_DEV_GET_GPU_RECOVERY_ACTION
 *                                      (nvmlDeviceGpuRecoveryAction_t: 0 none, 1 GPU reset,
 *                                      2 node reboot, 3 drain P2P, 4 drain and reset,
 *                                      5 recover IMEX domain)
 *     persistence                0/1   nvmlDeviceGetPersistenceMode (default 1)
 *     lost                       0/1   the GPU fell off the bus: its handle lookups (by index,
 *                                      by bus id) and every query on it answer
 *                                      NVML_ERROR_GPU_IS_LOST, as the real library does
 *
 * Every other key or value, a duplicate bus id, or a function other than 0 makes
 * nvmlInit_v2 fail with NVML_ERROR_UNKNOWN and a message on stderr naming the line.
 *
 * Implemented: nvmlInit_v2, nvmlShutdown, nvmlErrorString, nvmlSystemGetDriverVersion
 * ("580.0-fake"), nvmlSystemGetCudaDriverVersion_v2 (13000), nvmlDeviceGetCount_v2,
 * nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetHandleByPciBusId_v2, nvmlDeviceGetPciInfo_v3,
 * nvmlDeviceGetName, nvmlDeviceGetPersistenceMode, nvmlDeviceGetEccMode (enabled, none
 * pending), nvmlDeviceGetTotalEccErrors (corrected 0), nvmlDeviceGetRemappedRows,
 * nvmlDeviceGetRetiredPagesPendingStatus (not pending), nvmlDeviceGetFieldValues (only
 * NVML_FI_DEV_GET_GPU_RECOVERY_ACTION; every other field answers NVML_ERROR_NOT_SUPPORTED in
 * its entry) and nvmlDeviceGetNvLinkState (NVML_ERROR_NOT_SUPPORTED: no NVLink). Every other
 * NVML function is absent from the library, so a caller sees "not in this library" (the
 * collection's p2p/nvml.py: NVML_ERROR_FUNCTION_NOT_FOUND), as with an older driver.
 * Devices are enumerated in PCI bus id order, as NVML does.
 */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

/* ------------------------------------------------------------------ nvml.h's types */

typedef enum nvmlReturn_enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

typedef enum nvmlEnableState_enum {
    NVML_FEATURE_DISABLED = 0,
    NVML_FEATURE_ENABLED = 1
} nvmlEnableState_t;

typedef enum nvmlMemoryErrorType_enum {
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1,
    NVML_MEMORY_ERROR_TYPE_COUNT
} nvmlMemoryErrorType_t;

typedef enum nvmlEccCounterType_enum {
    NVML_VOLATILE_ECC = 0,
    NVML_AGGREGATE_ECC = 1,
    NVML_ECC_COUNTER_TYPE_COUNT
} nvmlEccCounterType_t;

typedef enum nvmlValueType_enum {
    NVML_VALUE_TYPE_DOUBLE = 0,
    NVML_VALUE_TYPE_UNSIGNED_INT = 1,
    NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
    NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
    NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
    NVML_VALUE_TYPE_SIGNED_INT = 5,
    NVML_VALUE_TYPE_UNSIGNED_SHORT = 6,
    NVML_VALUE_TYPE_COUNT
} nvmlValueType_t;

typedef union nvmlValue_st {
    double dVal;
    int siVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
    unsigned short usVal;
} nvmlValue_t;

typedef struct nvmlFieldValue_st {
    unsigned int fieldId;
    unsigned int scopeId;
    long long timestamp;
    long long latencyUsec;
    nvmlValueType_t valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;

#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
#define NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT "%04X:%02X:%02X.0"
#define NVML_DEVICE_PCI_BUS_ID_FMT "%08X:%02X:%02X.0"
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_FI_DEV_GET_GPU_RECOVERY_ACTION 230
#define NVML_GPU_RECOVERY_ACTION_RECOVER_IMEX_DOMAIN 5

typedef struct nvmlPciInfo_st {
    char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

/* ------------------------------------------------------------------ the fake GPUs */

#define DEFAULT_CONFIG "/etc/gpufleet/fake-nvml.conf"
#define CONFIG_ENV "GPUFLEET_FAKE_NVML_CONF"
#define DRIVER_VERSION "580.0-fake"
#define CUDA_DRIVER_VERSION 13000 /* 13.0, what an R580 driver reports */
#define DEFAULT_NAME "NVIDIA H100 80GB HBM3"
/* What scripts/harness/fleet gpu-plant puts in sysfs without device=: an H100 SXM (10de:2330). */
#define DEFAULT_PCI_DEVICE 0x2330u
#define PCI_VENDOR_NVIDIA 0x10DEu    /* pciDeviceId is device id << 16 | vendor id, as NVML reports it */
#define PCI_SUBSYSTEM_ID 0x16C110DEu
#define MAX_GPUS 64

struct nvmlDevice_st {
    unsigned int domain, bus, device, function;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    unsigned int pci_device;        /* the PCI device id, 0x2330 */
    unsigned int remap_failure, remap_pending, remapped_correctable, remapped_uncorrectable;
    unsigned long long ecc_uncorrected_volatile, ecc_uncorrected_aggregate;
    unsigned int recovery_action, persistence, lost;
};
typedef struct nvmlDevice_st *nvmlDevice_t;

static struct nvmlDevice_st gpus[MAX_GPUS];
static unsigned int gpu_count;
static unsigned int init_count; /* nvmlInit_v2 and nvmlShutdown are reference counted */

static void complain(const char *path, unsigned int line, const char *what, const char *detail)
{
    fprintf(stderr, "fake libnvidia-ml (molecule/fleet/files/fake_nvml.c): %s line %u: %s%s%s\n",
            path, line, what, detail ? ": " : "", detail ? detail : "");
}

/* One run of 1..max hex digits at *text, advanced past it; -1 when there is none or too many. */
static int hex_run(const char **text, unsigned int max, unsigned long *out)
{
    const char *p = *text;
    unsigned long value = 0;
    unsigned int digits = 0;
    for (;; p++) {
        int d;
        if (*p >= '0' && *p <= '9')
            d = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            d = *p - 'a' + 10;
        else if (*p >= 'A' && *p <= 'F')
            d = *p - 'A' + 10;
        else
            break;
        if (++digits > max)
            return -1;
        value = value * 16 + (unsigned long)d;
    }
    if (digits == 0)
        return -1;
    *text = p;
    *out = value;
    return 0;
}

/*
 * A PCI bus id in the forms nvmlDeviceGetHandleByPciBusId_v2 accepts (hex, any case):
 * domain:bus:device.function, domain:bus:device, bus:device.function. So sysfs's
 * 0000:41:00.0 and NVML's own 00000000:41:00.0 both name the same GPU.
 */
static int parse_bus_id(const char *text, unsigned int *domain, unsigned int *bus,
                        unsigned int *device, unsigned int *function)
{
    unsigned long a, b, c, f = 0;
    const char *p = text;
    if (hex_run(&p, 8, &a) || *p++ != ':' || hex_run(&p, 8, &b))
        return -1;
    if (*p == ':') {                /* domain:bus:device[.function] */
        p++;
        if (hex_run(&p, 2, &c))
            return -1;
        if (*p == '.') {
            p++;
            if (hex_run(&p, 1, &f))
                return -1;
        }
        if (a > 0xFFFFFFFFul || b > 0xFF)
            return -1;
        *domain = (unsigned int)a;
        *bus = (unsigned int)b;
    } else if (*p == '.') {         /* bus:device.function */
        p++;
        if (hex_run(&p, 1, &f))
            return -1;
        if (a > 0xFF)
            return -1;
        c = b;
        *domain = 0;
        *bus = (unsigned int)a;
    } else {
        return -1;
    }
    if (*p != '\0' || c > 0x1F || f > 7)
        return -1;
    *device = (unsigned int)c;
    *function = (unsigned int)f;
    return 0;
}

static int parse_number(const char *text, unsigned long long max, unsigned long long *out)
{
    unsigned long long value = 0;
    if (*text == '\0')
        return -1;
    for (; *text; text++) {
        if (*text < '0' || *text > '9')
            return -1;
        if (value > (max - (unsigned long long)(*text - '0')) / 10)
            return -1;
        value = value * 10 + (unsigned long long)(*text - '0');
    }
    *out = value;
    return 0;
}

static unsigned long long bus_order(const struct nvmlDevice_st *gpu)
{
    return ((unsigned long long)gpu->domain << 24) | (gpu->bus << 16) | (gpu->device << 8) | gpu->function;
}

static int by_bus_id(const void *a, const void *b)
{
    unsigned long long x = bus_order(a), y = bus_order(b);
    return x < y ? -1 : x > y;
}

/* One key=value of a GPU line; 0, or -1 after saying what is wrong. */
static int apply(struct nvmlDevice_st *gpu, char *word, const char *path, unsigned int line)
{
    static const struct {
        const char *key;
        size_t offset;
        int wide;                   /* unsigned long long, else unsigned int */
        unsigned long long max;
    } keys[] = {
        {"remap_failure", offsetof(struct nvmlDevice_st, remap_failure), 0, 1},
        {"remap_pending", offsetof(struct nvmlDevice_st, remap_pending), 0, 1},
        {"remapped_correctable", offsetof(struct nvmlDevice_st, remapped_correctable), 0, 0xFFFFFFFFull},
        {"remapped_uncorrectable", offsetof(struct nvmlDevice_st, remapped_uncorrectable), 0, 0xFFFFFFFFull},
        {"ecc_uncorrected_volatile", offsetof(struct nvmlDevice_st, ecc_uncorrected_volatile), 1, ~0ull},
        {"ecc_uncorrected_aggregate", offsetof(struct nvmlDevice_st, ecc_uncorrected_aggregate), 1, ~0ull},
        {"recovery_action", offsetof(struct nvmlDevice_st, recovery_action), 0,
         NVML_GPU_RECOVERY_ACTION_RECOVER_IMEX_DOMAIN},
        {"persistence", offsetof(struct nvmlDevice_st, persistence), 0, 1},
        {"lost", offsetof(struct nvmlDevice_st, lost), 0, 1},
    };
    char *value = strchr(word, '=');
    unsigned long long number;
    size_t i;
    if (value == NULL) {
        complain(path, line, "not key=value", word);
        return -1;
    }
    *value++ = '\0';
    if (strcmp(word, "name") == 0) {
        if (*value == '\0' || strlen(value) >= sizeof(gpu->name)) {
            complain(path, line, "name must have 1 to 95 characters", value);
            return -1;
        }
        for (i = 0; value[i]; i++)
            gpu->name[i] = value[i] == '_' ? ' ' : value[i];
        gpu->name[i] = '\0';
        return 0;
    }
    if (strcmp(word, "device") == 0) {
        const char *p = value + 2;
        unsigned long id;
        if (strncmp(value, "0x", 2) != 0 || hex_run(&p, 4, &id) || *p != '\0') {
            complain(path, line, "device must be 0x and 1 to 4 hex digits (the PCI device id, 0x2330)", value);
            return -1;
        }
        gpu->pci_device = (unsigned int)id;
        return 0;
    }
    for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        if (strcmp(word, keys[i].key) != 0)
            continue;
        if (parse_number(value, keys[i].max, &number)) {
            char detail[160];
            snprintf(detail, sizeof(detail), "%s=%s (a whole number from 0 to %llu)", word, value, keys[i].max);
            complain(path, line, "bad value", detail);
            return -1;
        }
        if (keys[i].wide)
            *(unsigned long long *)((char *)gpu + keys[i].offset) = number;
        else
            *(unsigned int *)((char *)gpu + keys[i].offset) = (unsigned int)number;
        return 0;
    }
    complain(path, line, "unknown key", word);
    return -1;
}

static nvmlReturn_t load(void)
{
    const char *path = getenv(CONFIG_ENV);
    char text[1024];
    unsigned int line = 0, i;
    FILE *file;
    if (path == NULL || *path == '\0')
        path = DEFAULT_CONFIG;
    gpu_count = 0;
    file = fopen(path, "r");
    if (file == NULL)
        return NVML_ERROR_DRIVER_NOT_LOADED;
    while (fgets(text, sizeof(text), file) != NULL) {
        struct nvmlDevice_st gpu;
        char *word, *save = NULL, *hash;
        line++;
        if (strchr(text, '\n') == NULL && !feof(file)) {
            complain(path, line, "line longer than 1023 characters", NULL);
            goto bad;
        }
        if ((hash = strchr(text, '#')) != NULL)
            *hash = '\0';
        word = strtok_r(text, " \t\r\n", &save);
        if (word == NULL)
            continue;
        memset(&gpu, 0, sizeof(gpu));
        strcpy(gpu.name, DEFAULT_NAME);
        gpu.pci_device = DEFAULT_PCI_DEVICE;
        gpu.persistence = 1;
        if (parse_bus_id(word, &gpu.domain, &gpu.bus, &gpu.device, &gpu.function) ||
            strchr(word, '.') == NULL || strchr(word, ':') == strrchr(word, ':')) {
            complain(path, line, "not a PCI bus id of the form 0000:41:00.0", word);
            goto bad;
        }
        if (gpu.function != 0) {
            complain(path, line, "an NVIDIA GPU is function 0 of its device", word);
            goto bad;
        }
        for (i = 0; i < gpu_count; i++) {
            if (bus_order(&gpus[i]) == bus_order(&gpu)) {
                complain(path, line, "a second line for the same GPU", word);
                goto bad;
            }
        }
        if (gpu_count == MAX_GPUS) {
            complain(path, line, "more GPUs than this stand-in holds (64)", NULL);
            goto bad;
        }
        while ((word = strtok_r(NULL, " \t\r\n", &save)) != NULL) {
            if (apply(&gpu, word, path, line))
                goto bad;
        }
        gpus[gpu_count++] = gpu;
    }
    if (ferror(file)) {
        complain(path, line, "read error", NULL);
        goto bad;
    }
    fclose(file);
    qsort(gpus, gpu_count, sizeof(gpus[0]), by_bus_id);
    return NVML_SUCCESS;
bad:
    fclose(file);
    gpu_count = 0;
    return NVML_ERROR_UNKNOWN;
}

/* The device behind a handle: SUCCESS, or the code a query on it answers. */
static nvmlReturn_t check(nvmlDevice_t device)
{
    unsigned int i;
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    for (i = 0; i < gpu_count; i++) {
        if (device == &gpus[i])
            return device->lost ? NVML_ERROR_GPU_IS_LOST : NVML_SUCCESS;
    }
    return NVML_ERROR_INVALID_ARGUMENT;
}

static nvmlReturn_t copy_string(const char *value, char *buffer, unsigned int length)
{
    size_t size = strlen(value) + 1;
    if (buffer == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (length < size)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buffer, value, size);
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------ the API */

nvmlReturn_t nvmlInit_v2(void)
{
    nvmlReturn_t code;
    if (init_count > 0) {
        init_count++;
        return NVML_SUCCESS;
    }
    code = load();
    if (code == NVML_SUCCESS)
        init_count = 1;
    return code;
}

nvmlReturn_t nvmlShutdown(void)
{
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    init_count--;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result)
{
    switch ((int)result) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 5: return "Already Initialized";
    case 6: return "Not Found";
    case 7: return "Insufficient Size";
    case 8: return "Insufficient External Power";
    case 9: return "Driver Not Loaded";
    case 10: return "Timeout";
    case 11: return "Interrupt request issue";
    case 12: return "NVML Shared Library Not Found";
    case 13: return "Function Not Found";
    case 14: return "Corrupted infoROM";
    case 15: return "GPU is lost";
    case 16: return "GPU requires restart";
    case 17: return "The operating system has blocked the request";
    case 18: return "RM has detected an NVML/RM version mismatch";
    case 19: return "In use by another client";
    case 20: return "Insufficient Memory";
    case 21: return "No data";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    return copy_string(DRIVER_VERSION, version, length);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (cudaDriverVersion == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *cudaDriverVersion = CUDA_DRIVER_VERSION;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (deviceCount == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = gpu_count;       /* a lost GPU still counts, as with the real library */
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (device == NULL || index >= gpu_count)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (gpus[index].lost)
        return NVML_ERROR_GPU_IS_LOST;
    *device = &gpus[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
    unsigned int domain, bus, dev, function, i;
    if (init_count == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (pciBusId == NULL || device == NULL || parse_bus_id(pciBusId, &domain, &bus, &dev, &function))
        return NVML_ERROR_INVALID_ARGUMENT;
    for (i = 0; i < gpu_count; i++) {
        if (gpus[i].domain == domain && gpus[i].bus == bus && gpus[i].device == dev &&
            gpus[i].function == function) {
            if (gpus[i].lost)
                return NVML_ERROR_GPU_IS_LOST;
            *device = &gpus[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    nvmlReturn_t code = check(device);
    if (code != NVML_SUCCESS)
        return code;
    if (pci == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    memset(pci, 0, sizeof(*pci));
    /* The legacy form holds a 4-digit domain only. */
    snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT,
             device->domain & 0xFFFFu, device->bus, device->device);
    snprintf(pci->busId, sizeof(pci->busId), NVML_DEVICE_PCI_BUS_ID_FMT, device->domain, device->bus,
             device->device);
    pci->domain = device->domain;
    pci->bus = device->bus;
    pci->device = device->device;
    pci->pciDeviceId = device->pci_device << 16 | PCI_VENDOR_NVIDIA;
    pci->pciSubSystemId = PCI_SUBSYSTEM_ID;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    nvmlReturn_t code = check(device);
    if (code != NVML_SUCCESS)
        return code;
    return copy_string(device->name, name, length);
}

nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t *mode)
{
    nvmlReturn_t code = check(device);
    if (code != NVML_SUCCESS)
        return code;
    if (mode == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *mode = device->persistence ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t *current, nvmlEnableState_t *pending)
{
    nvmlReturn_t code = check(device);
    if (code != NVML_SUCCESS)
        return code;
    if (current == NULL || pending == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *current = NVML_FEATURE_ENABLED;
    *pending = NVML_FEATURE_ENABLED;  /* the mode after the next reboot: unchanged */
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                         nvmlEccCounterType_t counterType, unsigned long long *eccCounts)
{
    nvmlReturn_t code = check(device);
    if (code != NVML_SUCCESS)
        return code;
    if (eccCounts == NULL || (unsigned int)errorType >= NVML_MEMORY_ERROR_TYPE_COUNT ||
        (unsigned int)counterType >= NVML_ECC_COUNTER_TYPE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (errorType == NVML_MEMORY_ERROR_TYPE_CORRECTED)
        *eccCounts = 0;
    else
        *eccCounts = counterType == NVML_VOLATILE_ECC ? device->ecc_uncorrected_volatile
                                                      : device->ecc_uncorrected_aggregate;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows, unsigned int *uncRows,
                                       unsigned int *isPending, unsigned int *failureOccurred)
{
    nvmlReturn_t code = check(device);
    if (code != NVML_SUCCESS)
        return code;
    if (corrRows == NULL || uncRows == NULL || isPending == NULL || failureOccurred == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *corrRows = device->remapped_correctable;
    *uncRows = device->remapped_uncorrectable;
    *isPending = device->remap_pending;
    *failureOccurred = device->remap_failure;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device, nvmlEnableState_t *isPending)
{
    nvmlReturn_t code = check(device);
    if (code != NVML_SUCCESS)
        return code;
    if (isPending == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *isPending = NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount, nvmlFieldValue_t *values)
{
    nvmlReturn_t code = check(device);
    struct timeval now;
    long long stamp;
    int i;
    if (code == NVML_ERROR_UNINITIALIZED || code == NVML_ERROR_INVALID_ARGUMENT)
        return code;
    if (values == NULL || valuesCount < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    gettimeofday(&now, NULL);
    stamp = (long long)now.tv_sec * 1000000 + now.tv_usec;
    for (i = 0; i < valuesCount; i++) {
        nvmlFieldValue_t *entry = &values[i];
        entry->timestamp = stamp;
        entry->latencyUsec = 0;
        memset(&entry->value, 0, sizeof(entry->value));
        if (code != NVML_SUCCESS) {
            entry->nvmlReturn = code;   /* a lost GPU: every entry says so */
        } else if (entry->fieldId == NVML_FI_DEV_GET_GPU_RECOVERY_ACTION) {
            entry->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
            entry->value.uiVal = device->recovery_action;
            entry->nvmlReturn = NVML_SUCCESS;
        } else {
            entry->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        }
    }
    return code;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, nvmlEnableState_t *isActive)
{
    nvmlReturn_t code = check(device);
    (void)link;
    if (code != NVML_SUCCESS)
        return code;
    if (isActive == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_ERROR_NOT_SUPPORTED;    /* PCIe only: no NVLink on these GPUs */
}
