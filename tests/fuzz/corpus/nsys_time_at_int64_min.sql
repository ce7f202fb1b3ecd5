-- A memset whose start and end are the smallest int64 (what CAST(-inf AS INTEGER) gives): the
-- device window and the whole-trace step overflow to negative times.
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
INSERT INTO StringIds VALUES (1, 'cudaLaunchKernel_v7000'), (2, 'k');
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, "end" INTEGER, globalTid INTEGER, correlationId INTEGER,
                                          nameId INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (0, 2000, 281476654432257, 1, 1);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, "end" INTEGER, deviceId INTEGER, streamId INTEGER,
                                         correlationId INTEGER, globalPid INTEGER, demangledName INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (5000, 8000, 0, 7, 1, 281476654432256, 2);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER, "end" INTEGER, deviceId INTEGER, streamId INTEGER,
                                         correlationId INTEGER, globalPid INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (-9223372036854775808, -9223372036854775808, 0, 7, NULL,
                                               281476654432256);
