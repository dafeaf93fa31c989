#include <pthread.h>
#include <unistd.h>
#include <stdint.h>
#include <time.h>
#include <sys/eventfd.h>
typedef void (*cb_t)(uint32_t);
static cb_t g_cb; static int g_fd; static volatile int g_n;
static volatile uint64_t sent_ns;
static uint64_t now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000ull+t.tv_nsec;}
uint64_t db_now(){return now();}
uint64_t db_sent(){return sent_ns;}
static void* th(void*a){ for(int i=0;i<g_n;i++){ usleep(200); sent_ns=now(); if(g_cb) g_cb(i); else { uint64_t one=1; write(g_fd,&one,8);} } return 0;}
int db_start_cb(cb_t cb,int n){g_cb=cb;g_n=n;pthread_t t;return pthread_create(&t,0,th,0);}
int db_start_fd(int fd,int n){g_cb=0;g_fd=fd;g_n=n;pthread_t t;return pthread_create(&t,0,th,0);}
int db_eventfd(){return eventfd(0,0);}
int db_pipe(int*p){return pipe(p);}
